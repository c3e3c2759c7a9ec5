// SPDX-License-Identifier: BSD-3-Clause
//
// main() for a fuzz target without libFuzzer: runs LLVMFuzzerTestOneInput over every file of the
// directories (or files) named on the command line, so that the normal gcc build exercises the
// targets on their seed corpus (under ASan and UBSan). A seed named "<verdict>--<what>" must get
// that verdict from the target's dpfab_fuzz_verdict() (a target without it skips the check).
// Exits non-zero on a wrong verdict or when it found no input; a crash ends the process anyway.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" const char* dpfab_fuzz_verdict(const uint8_t* data, size_t size) __attribute__((weak));

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int a = 1; a < argc; ++a) {
    std::error_code ec;
    if (fs::is_directory(argv[a], ec)) {
      for (const auto& e : fs::directory_iterator(argv[a]))
        if (e.is_regular_file()) inputs.push_back(e.path());
    } else if (fs::is_regular_file(argv[a], ec)) {
      inputs.emplace_back(argv[a]);
    } else {
      std::fprintf(stderr, "corpus_runner: no such file or directory: %s\n", argv[a]);
      return 2;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  int wrong = 0;
  size_t checked = 0;
  for (const auto& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
    // An exact-size heap copy: a read past the end is an ASan report, as under libFuzzer.
    auto* copy = new uint8_t[bytes.size() ? bytes.size() : 1];
    std::copy(bytes.begin(), bytes.end(), copy);
    LLVMFuzzerTestOneInput(copy, bytes.size());
    const std::string name = p.filename().string();
    const auto sep = name.find("--");
    if (dpfab_fuzz_verdict != nullptr && sep != std::string::npos) {
      const std::string want = name.substr(0, sep);
      const std::string got = dpfab_fuzz_verdict(copy, bytes.size());
      ++checked;
      if (got != want) {
        std::fprintf(stderr, "corpus_runner: %s: verdict %s, expected %s\n", p.c_str(), got.c_str(),
                     want.c_str());
        ++wrong;
      }
    }
    delete[] copy;
  }
  std::printf("corpus_runner: %zu inputs, %zu verdicts checked, %d wrong\n", inputs.size(), checked,
              wrong);
  if (inputs.empty()) return 1;
  return wrong == 0 ? 0 : 1;
}
