// plant_key_outliers IN.gguf OUT.gguf SCALE [PAIR]: a copy of a model with outlier key channels
// that computes the same function at full precision (tools/key_outliers.h). An experiment tool
// for the INT8 KV cache: run bench/experiments/kv_recall.sh on OUT.
#include <cstdio>
#include <exception>
#include <string>

#include "tools/key_outliers.h"

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: plant_key_outliers IN.gguf OUT.gguf SCALE [PAIR]\n");
    return 1;
  }
  try {
    const double scale = std::stod(argv[3]);
    const long long pair = argc == 5 ? std::stoll(argv[4]) : -1;
    shrike::tools::plant_key_outliers(argv[1], argv[2], scale, pair);
    std::printf("%s -> %s: key pair %s of every KV head x%g, query pair x1/%g\n", argv[1], argv[2],
                argc == 5 ? argv[4] : "(last)", scale, scale);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plant_key_outliers: %s\n", e.what());
    return 2;
  }
  return 0;
}
