// TempFile: committed files land under their name, abandoned ones vanish, space is checked before
// any byte is written, and a SIGTERM during a write removes the temporary file.
#include "nexus/io/temp_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/gguf_stream_writer.h"
#include "nexus/io/mapped_file.h"

namespace nexus {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path d =
      fs::temp_directory_path() / ("nexus_temp_file_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Runs `body` in a forked child (which must end the process itself: _exit, or a signal) and
// returns its wait status.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

TEST(TempFile, CommitRenamesAndAnAbandonedFileIsRemoved) {
  const std::string dir = temp_dir("commit");
  const int before = registered_temp_files();
  {
    TempFile t(dir + "/a.tmp");
    ASSERT_GE(t.fd(), 0);
    EXPECT_EQ(registered_temp_files(), before + 1);
    ASSERT_EQ(::write(t.fd(), "abc", 3), 3);
    ASSERT_TRUE(t.commit(dir + "/a.bin").is_ok());
  }
  EXPECT_EQ(registered_temp_files(), before);
  EXPECT_TRUE(fs::exists(dir + "/a.bin"));
  EXPECT_FALSE(fs::exists(dir + "/a.tmp"));
  {
    TempFile t(dir + "/b.tmp");
    ASSERT_EQ(::write(t.fd(), "abc", 3), 3);
    EXPECT_TRUE(fs::exists(dir + "/b.tmp"));
  }  // an error path returns without commit()
  EXPECT_FALSE(fs::exists(dir + "/b.tmp"));
  EXPECT_EQ(registered_temp_files(), before);
  TempFile bad(dir + "/no/such/dir/c.tmp");
  EXPECT_LT(bad.fd(), 0);
  const Status st = bad.open_status(dir + "/c.bin");
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("c.bin"), std::string::npos) << st.message();
  EXPECT_EQ(registered_temp_files(), before);
  fs::remove_all(dir);
}

TEST(TempFile, ReserveRefusesMoreThanTheDiskHolds) {
  const std::string dir = temp_dir("reserve");
  TempFile t(dir + "/big.tmp");
  ASSERT_GE(t.fd(), 0);
  EXPECT_TRUE(t.reserve(4096, dir + "/big.bin").is_ok());
  const Status st = t.reserve(uint64_t{1} << 62, dir + "/big.bin");  // 4 EiB
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("not enough disk space for '" + dir + "/big.bin'"), std::string::npos)
      << st.message();
  fs::remove_all(dir);
}

// A stream writer's temporary file is gone after a SIGTERM in the middle of its write (its
// producer raises it), and the process died of that signal. In a child process.
TEST(TempFile, SigtermDuringAWriteRemovesTheTemporaryFile) {
  const std::string dir = temp_dir("signal");
  const std::string out = dir + "/m.gguf";
  const int status = in_child([&] {
    remove_temp_files_on_signals();
    GgufStreamWriter w;
    w.add_tensor("t", DType::kF32, {4, 1024}, [](int64_t r0, int64_t, uint8_t*) {
      if (r0 > 0) std::raise(SIGTERM);
    });
    w.set_chunk_bytes(4096);  // one row a chunk: the second chunk raises
    (void)w.write(out);       // not finished: the signal ends the process
  });
  ASSERT_NE(status, -1) << "fork or waitpid failed";
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir)) << "a temporary file was left behind";
  fs::remove_all(dir);
}

// Under a file-size limit (SIGXFSZ ignored), the reservation fails before any data is written:
// one error naming the output, and no temporary file left.
TEST(TempFile, FileSizeLimitFailsAtTheReservation) {
  const std::string dir = temp_dir("fsize");
  const std::string out = dir + "/x.bin";
  const int status = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{64 * 1024, 64 * 1024};
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(3);
    const std::string big(1 << 20, 'x');
    const Status st = write_file_atomic(out, big.data(), big.size());
    const bool named = !st.is_ok() && st.message().find("cannot reserve") != std::string::npos &&
                       st.message().find("for '" + out + "'") != std::string::npos;
    _exit(named ? 0 : 1);
  });
  ASSERT_NE(status, -1) << "fork or waitpid failed";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: no reservation error naming the output; 3: setrlimit failed";
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(dir)) << "a temporary file was left behind";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nexus
