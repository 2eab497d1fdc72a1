// Models and measurements that `shrike optimize` writes into OUT are rebuilt only when what made
// them changes. Each artefact has a key: a hash of the command that builds it (options included)
// and of the contents of its input files. OUT/manifest.json maps artefact paths to keys; an
// artefact is fresh when its file exists and the manifest holds the same key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace shrike::optimize {

// FNV-1a 64 of a file's bytes, as 16 hex digits. Throws FileError when it cannot be read.
std::string file_hash(const std::string& path);

// The key of an artefact: the recipe (command line, options; anything that changes the output)
// and the content hashes of the input files, in order.
std::string artefact_key(const std::vector<std::string>& recipe,
                         const std::vector<std::string>& input_files);

class ArtefactCache {
 public:
  // Reads manifest_path when it exists (a damaged manifest counts as empty: all rebuilt).
  explicit ArtefactCache(std::string manifest_path);

  bool fresh(const std::string& artefact_path, const std::string& key) const;
  // Records a freshly built artefact and writes the manifest at once, so an interrupted run
  // keeps what it finished.
  void record(const std::string& artefact_path, const std::string& key);
  // Forgets an artefact before rebuilding it, so a failed build is not taken for fresh later.
  void forget(const std::string& artefact_path);

 private:
  void save() const;
  std::string path_;
  std::map<std::string, std::string> keys_;
};

}  // namespace shrike::optimize
