// libFuzzer target: the reader of `tfw import` (engine/interop/torch_pickle.h) on a LibTorch archive.
// An input that starts with "PK" (a zip's signature) is the whole archive file: its directory,
// declared sizes and deflated records (issue 50, finding 8: a 3 MB file whose data.pkl
// inflated to 3 GiB). Any other input is a data.pkl, put inside a real zip archive written by
// LibTorch's own writer with four storage records of 256 bytes ("data/0" to "data/3"), so that
// persistent ids can name them. Any outcome but a state dict or a UsageError is a finding.
// This target links LibTorch.
#include <unistd.h>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <caffe2/serialize/inline_container.h>
#include "engine/core/error.h"
#include "engine/interop/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/tfw-fuzz-pickle-" + std::to_string(::getpid()) + ".pt";
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  } else {
    caffe2::serialize::PyTorchStreamWriter writer(path);
    writer.writeRecord("data.pkl", data, size);
    static const std::string storage(256, '\x01');
    for (const char* key : {"data/0", "data/1", "data/2", "data/3"})
      writer.writeRecord(key, storage.data(), storage.size());
    writer.writeEndOfFile();
  }
  try {
    (void)tfw::torch_state_dict_read(path);
  } catch (const tfw::UsageError&) {}
  return 0;
}
