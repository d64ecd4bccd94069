// Distributed synchronous SGD, after PyTorch's "Writing Distributed
// Applications": each rank trains the same two-layer model on its own shard
// of a synthetic regression set and averages gradients with allreduce(avg)
// after every batch, so every rank's model stays identical and the loss falls
// the same everywhere. Run: rr-run -n 4 examples/sgd
#include <ringreduce/ringreduce.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#define CHECK(call)                                                                       \
  do {                                                                                    \
    rrResult_t r_ = (call);                                                               \
    if (r_ != rrSuccess) {                                                                \
      std::fprintf(stderr, "%s: %s: %s\n", #call, rrGetErrorString(r_), rrGetLastError(comm)); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

namespace {

constexpr int kInputs = 8;
constexpr int kHidden = 16;

// y = w2 . tanh(W1 x + b1) + b2, all parameters in one flat vector so one
// allreduce averages every gradient.
struct Model {
  std::vector<double> params;  // [W1 (kHidden x kInputs)][b1 (kHidden)][w2 (kHidden)][b2]
  Model() : params(kHidden * kInputs + 2 * kHidden + 1) {}
  double* w1() { return params.data(); }
  double* b1() { return w1() + kHidden * kInputs; }
  double* w2() { return b1() + kHidden; }
  double* b2() { return w2() + kHidden; }
};

// Adds the gradient of the squared error on (x, y) to `grad`; returns the loss.
double backprop(Model& m, const double* x, double y, Model& grad) {
  double h[kHidden];
  double out = *m.b2();
  for (int j = 0; j < kHidden; ++j) {
    double a = m.b1()[j];
    for (int i = 0; i < kInputs; ++i) a += m.w1()[j * kInputs + i] * x[i];
    h[j] = std::tanh(a);
    out += m.w2()[j] * h[j];
  }
  const double err = out - y;
  *grad.b2() += err;
  for (int j = 0; j < kHidden; ++j) {
    grad.w2()[j] += err * h[j];
    const double da = err * m.w2()[j] * (1 - h[j] * h[j]);
    grad.b1()[j] += da;
    for (int i = 0; i < kInputs; ++i) grad.w1()[j * kInputs + i] += da * x[i];
  }
  return 0.5 * err * err;
}

}  // namespace

int main() {
  rrComm_t comm = nullptr;
  CHECK(rrCommInitFromEnv(&comm));
  int rank = 0, size = 0;
  CHECK(rrCommUserRank(comm, &rank));
  CHECK(rrCommCount(comm, &size));

  // The same initial model on every rank (same seed), a different data shard per rank.
  Model model;
  std::mt19937_64 init(42);
  std::normal_distribution<double> normal(0.0, 0.3);
  for (double& p : model.params) p = normal(init);
  std::mt19937_64 data(1000 + static_cast<uint64_t>(rank));
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  constexpr int kSamples = 256, kBatch = 32, kEpochs = 10;
  std::vector<double> xs(kSamples * kInputs), ys(kSamples);
  for (int s = 0; s < kSamples; ++s) {
    double y = 0;
    for (int i = 0; i < kInputs; ++i) {
      xs[s * kInputs + i] = uniform(data);
      y += std::sin((i + 1) * xs[s * kInputs + i]) / (i + 1);  // the function to learn
    }
    ys[s] = y;
  }

  const double lr = 0.05;
  double first = 0, last = 0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double epoch_loss = 0;
    for (int start = 0; start < kSamples; start += kBatch) {
      Model grad;
      for (int s = start; s < start + kBatch; ++s) epoch_loss += backprop(model, &xs[s * kInputs], ys[s], grad);
      // average_gradients(model): allreduce(SUM) / world size, in one call.
      CHECK(rrAllReduce(grad.params.data(), grad.params.data(), grad.params.size(), rrFloat64, rrAvg, comm, nullptr));
      for (size_t k = 0; k < model.params.size(); ++k) model.params[k] -= lr * grad.params[k] / kBatch;
    }
    // Every rank reports the mean loss over all shards.
    double mean = epoch_loss / kSamples;
    CHECK(rrAllReduce(&mean, &mean, 1, rrFloat64, rrAvg, comm, nullptr));
    if (rank == 0) std::printf("epoch %d: loss %.6f\n", epoch, mean);
    if (epoch == 0) first = mean;
    last = mean;
  }

  // Identical models everywhere: the largest parameter and its smallest copy agree.
  double spread = 0;
  for (double p : model.params) {
    double lo = p, hi = p;
    CHECK(rrAllReduce(&lo, &lo, 1, rrFloat64, rrMin, comm, nullptr));
    CHECK(rrAllReduce(&hi, &hi, 1, rrFloat64, rrMax, comm, nullptr));
    spread = std::fmax(spread, hi - lo);
  }
  const bool ok = last < 0.7 * first && spread == 0.0;
  std::printf("Rank %d: loss %.6f -> %.6f, parameters %s across ranks\n", rank, first, last,
              spread == 0.0 ? "identical" : "DIFFER");
  CHECK(rrCommDestroy(comm));
  return ok ? 0 : 1;
}
