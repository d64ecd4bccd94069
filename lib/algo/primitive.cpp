#include "algo/primitive.hpp"

namespace rr::algo {

const char* primitive_name(Primitive p) {
  switch (p) {
    case Primitive::kSend: return "send";
    case Primitive::kCopySend: return "copySend";
    case Primitive::kRecvReduceSend: return "recvReduceSend";
    case Primitive::kRecvReduceCopySend: return "recvReduceCopySend";
    case Primitive::kRecvReduceCopy: return "recvReduceCopy";
    case Primitive::kRecvCopySend: return "recvCopySend";
    case Primitive::kRecv: return "recv";
  }
  return "?";
}

}  // namespace rr::algo
