// Loads the golden cases of tests/golden (computed independently in float64; see its README).
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace golden {

struct case_data {
  std::string name;
  std::map<std::string, std::string> keys;
  std::string dir;

  std::int64_t num(const std::string& k) const { return std::stoll(keys.at(k)); }
  const std::string& kind() const { return keys.at("kind"); }
  bool fp4() const { return num("fp4") != 0; }

  template <class T>
  std::vector<T> load(const std::string& file) const {
    std::ifstream in(dir + "/" + file, std::ios::binary);
    if (!in) throw std::runtime_error("golden: cannot open " + dir + "/" + file);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (bytes.size() % sizeof(T)) throw std::runtime_error("golden: bad size of " + file);
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
};

inline case_data load_case(const std::string& name) {
  case_data c;
  c.name = name;
  c.dir = std::string(MQALOGITS_GOLDEN_DIR) + "/" + name;
  std::ifstream in(c.dir + "/case.txt");
  if (!in) throw std::runtime_error("golden: cannot open " + c.dir + "/case.txt");
  std::string k, v;
  while (in >> k >> v) c.keys[k] = v;
  return c;
}

inline const std::vector<std::string>& case_names() {
  static const std::vector<std::string> names = {
      "case000_dense_fp8",        "case001_dense_fp8",  "case002_paged_fp8",
      "case003_sparse_fp8",       "case004_paged_sparse_fp8", "case005_dense_fp4",
      "case006_dense_fp4",        "case007_paged_fp4",  "case008_sparse_fp4",
      "case009_paged_sparse_fp4"};
  return names;
}

}  // namespace golden
