// Buffer-protocol views, the element type of a buffer's format, and the
// buffer checks the collectives share.

#include "buffers.hpp"

#include <cstring>

#include "errors.hpp"

namespace ringreduce_core {

namespace {

constexpr const char* kSupportedTypes =
    "int8, uint8, int32, uint32, int64, uint64, float16, float32, float64 and bool";

// A struct-module format (PEP 3118) and item size -> Element. Only native
// byte order: the engine reduces in the machine's.
bool element_of(const char* format, Py_ssize_t itemsize, Element* out) {
  std::string f = format ? format : "B";
  if (!f.empty() && std::strchr("@=<>!", f[0])) {
    const bool big = f[0] == '>' || f[0] == '!';
    const bool little_host = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if (itemsize > 1 && ((big && little_host) || (f[0] == '<' && !little_host))) return false;
    f.erase(0, 1);
  }
  if (f.size() != 1) return false;
  const char c = f[0];
  Element e;
  switch (c) {
    case '?': e = {rrUint8, true, false, "bool"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'b': e = {rrInt8, false, false, "int8"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'B': case 'c': e = {rrUint8, false, false, "uint8"}; return itemsize == 1 ? (*out = e, true) : false;
    case 'e': e = {rrFloat16, false, true, "float16"}; return itemsize == 2 ? (*out = e, true) : false;
    case 'f': e = {rrFloat32, false, true, "float32"}; return itemsize == 4 ? (*out = e, true) : false;
    case 'd': e = {rrFloat64, false, true, "float64"}; return itemsize == 8 ? (*out = e, true) : false;
    case 'i': case 'l': case 'q': case 'n':
      if (itemsize == 4) *out = {rrInt32, false, false, "int32"};
      else if (itemsize == 8) *out = {rrInt64, false, false, "int64"};
      else return false;
      return true;
    case 'I': case 'L': case 'Q': case 'N':
      if (itemsize == 4) *out = {rrUint32, false, false, "uint32"};
      else if (itemsize == 8) *out = {rrUint64, false, false, "uint64"};
      else return false;
      return true;
    default: return false;
  }
}

// IN_PLACE is the one instance of this type.
struct InPlace {};

py::object& in_place_object() {
  static py::object* obj = nullptr;  // leaked: lives as long as the module
  if (!obj) obj = new py::object();
  return *obj;
}

}  // namespace

Buffer Buffer::acquire(py::handle obj, const char* call, const char* arg, bool writable) {
  Buffer b;
  if (obj.is_none()) {
    invalid_argument(std::string(call) + ": " + arg + " is None; pass a numpy array or another object with a " +
                     (writable ? "writable " : "") + "buffer");
  }
  if (PyObject_GetBuffer(obj.ptr(), &b.view_, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    invalid_argument(std::string(call) + ": " + arg + " (" + type_name(obj) +
                     ") does not support the buffer protocol; pass a numpy array, bytearray or memoryview");
  }
  b.held_ = true;
  if (writable && b.view_.readonly) {
    invalid_argument(std::string(call) + ": " + arg + " (" + type_name(obj) +
                     ") is read-only; the call writes its result there");
  }
  if (!b.c_contiguous()) {
    invalid_argument(std::string(call) + ": " + arg + " is not C-contiguous (strides " + b.strides_text() +
                     "); pass numpy.ascontiguousarray(" + arg + "), or a contiguous copy, instead");
  }
  if (!element_of(b.view_.format, b.view_.itemsize, &b.element_)) {
    invalid_argument(std::string(call) + ": " + arg + " has elements of format '" +
                     (b.view_.format ? b.view_.format : "B") + "' (" + std::to_string(b.view_.itemsize) +
                     " bytes), which ringreduce has no type for; supported: " + kSupportedTypes +
                     " (native byte order)");
  }
  b.count_ = b.view_.itemsize > 0 ? static_cast<size_t>(b.view_.len / b.view_.itemsize) : 0;
  return b;
}

bool Buffer::c_contiguous() const {
  if (view_.suboffsets) return false;
  if (view_.len == 0 || !view_.strides) return true;
  Py_ssize_t expected = view_.itemsize;
  for (int i = view_.ndim - 1; i >= 0; --i) {
    if (view_.shape[i] != 1 && view_.strides[i] != expected) return false;
    expected *= view_.shape[i];
  }
  return true;
}

std::string Buffer::strides_text() const {
  std::string s = "(";
  for (int i = 0; i < view_.ndim; ++i) s += (i ? ", " : "") + std::to_string(view_.strides[i]);
  return s + (view_.ndim == 1 ? ",)" : ")");
}

void Buffer::release() {
  if (held_) PyBuffer_Release(&view_);
  held_ = false;
}

void same_element(const char* call, const Buffer& send, const Buffer& recv) {
  const Element& a = send.element();
  const Element& b = recv.element();
  if (a.dtype != b.dtype || a.is_bool != b.is_bool) {
    invalid_argument(std::string(call) + ": sendbuf holds " + a.name + " but recvbuf holds " + b.name +
                     "; both must have the same element type");
  }
}

size_t blocks_of(const char* call, const char* arg, const Buffer& b, int n) {
  if (b.count() % static_cast<size_t>(n) != 0) {
    invalid_argument(std::string(call) + ": " + arg + " has " + std::to_string(b.count()) +
                     " elements, which do not split into " + std::to_string(n) + " equal blocks (one per rank)");
  }
  return b.count() / static_cast<size_t>(n);
}

void expect_count(const char* call, const char* arg, const Buffer& b, size_t expected, const std::string& why) {
  if (b.count() != expected) {
    invalid_argument(std::string(call) + ": " + arg + " has " + std::to_string(b.count()) + " elements but " +
                     std::to_string(expected) + " were expected (" + why + ")");
  }
}

bool is_in_place(py::handle obj) { return obj.is(in_place_object()); }

void bind_in_place(py::module_& m) {
  py::class_<InPlace>(m, "_InPlaceType", "The type of ringreduce.IN_PLACE.")
      .def("__repr__", [](const InPlace&) { return "ringreduce.IN_PLACE"; })
      .def("__reduce__", [](const InPlace&) { return py::str("IN_PLACE"); });
  in_place_object() = py::cast(InPlace{});
  m.attr("IN_PLACE") = in_place_object();
}

}  // namespace ringreduce_core
