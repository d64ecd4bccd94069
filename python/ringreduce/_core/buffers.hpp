#pragma once
// Buffers through the buffer protocol: the engine's element type of a
// buffer's format, the C-contiguous view a call holds while the engine uses
// it, the checks every collective makes of its buffers (each naming the call
// and the argument), and ringreduce.IN_PLACE, which stands in a buffer
// argument's place.

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>

#include <ringreduce/ringreduce.h>

namespace ringreduce_core {

namespace py = pybind11;

// The engine's element type of a buffer. numpy bool travels as uint8 and
// reduces logically (resolve_op).
struct Element {
  rrDataType_t dtype = rrUint8;
  bool is_bool = false;
  bool is_float = false;
  const char* name = "uint8";
};

// A C-contiguous buffer held through the buffer protocol for as long as this
// object lives (which also keeps e.g. a bytearray from being resized under
// the engine). Released with the GIL held, as PyBuffer_Release needs.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept
      : view_(other.view_), held_(other.held_), element_(other.element_), count_(other.count_) {
    other.held_ = false;
  }
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      release();
      view_ = other.view_;
      held_ = other.held_;
      element_ = other.element_;
      count_ = other.count_;
      other.held_ = false;
    }
    return *this;
  }
  ~Buffer() { release(); }

  // `call` and `arg` name the method and argument in error messages.
  static Buffer acquire(py::handle obj, const char* call, const char* arg, bool writable);

  void* data() const { return view_.buf; }
  // The address `elements` elements in.
  void* at(size_t elements) const {
    return static_cast<char*>(view_.buf) + elements * static_cast<size_t>(view_.itemsize);
  }
  size_t count() const { return count_; }
  const Element& element() const { return element_; }
  bool held() const { return held_; }

  // Gives up the view without releasing it (at interpreter exit, when the
  // engine may still write into it and nothing may be freed).
  void leak() { held_ = false; }

 private:
  bool c_contiguous() const;
  std::string strides_text() const;
  void release();

  Py_buffer view_{};
  bool held_ = false;
  Element element_;
  size_t count_ = 0;
};

// Refuses send and receive buffers of different element types.
void same_element(const char* call, const Buffer& send, const Buffer& recv);

// count = n * block; the block size, or a clear error naming `arg`.
size_t blocks_of(const char* call, const char* arg, const Buffer& b, int n);

// Refuses `b` unless it has `expected` elements; `why` says where that number comes from.
void expect_count(const char* call, const char* arg, const Buffer& b, size_t expected, const std::string& why);

// Whether `obj` is ringreduce.IN_PLACE.
bool is_in_place(py::handle obj);

// Adds IN_PLACE (and its type, _InPlaceType) to `m`.
void bind_in_place(py::module_& m);

}  // namespace ringreduce_core
