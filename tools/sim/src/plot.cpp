// The figure of reccl-sim --plot: gnuplot reads a script with the data inline.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "reccl/sim/report.h"

extern char** environ;

namespace reccl::sim {

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Runs gnuplot on `script`; its stderr passes through.
Status runGnuplot(const std::string& script) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/reccl-sim-plot.XXXXXX";
  int fd = ::mkstemp(path.data());
  if (fd < 0) return Status::FromErrno(errno, "--plot: mkstemp " + path);
  bool written = ::write(fd, script.data(), script.size()) == ssize_t(script.size());
  int werr = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    return Status::FromErrno(werr, "--plot: write " + path);
  }
  char* argv[] = {const_cast<char*>("gnuplot"), path.data(), nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (rc != 0) {
    ::unlink(path.c_str());
    if (rc == ENOENT)
      return {Errc::kUnsupported, "--plot: gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)"};
    return Status::FromErrno(rc, "--plot: cannot run gnuplot");
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  ::unlink(path.c_str());
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return {Errc::kInternal, "--plot: gnuplot failed (its message above)"};
  return {};
}

}  // namespace

Status plotLossVsSize(const std::vector<SizeOutcome>& r, const std::string& title, const std::string& pngPath) {
  if (r.empty() || r[0].policies.empty()) return {Errc::kInvalidArgument, "--plot: nothing to plot"};
  std::ostringstream g;
  g << "set terminal pngcairo size 1100,650 font \"sans,10\"\n"
    << "set output " << quoted(pngPath) << "\n"
    << "set title " << quoted(title) << "\n"
    << "set logscale xy\nset grid xtics ytics mytics\nset key top left\n"
    << "set format x \"%.0f\"\nset xlabel \"GPUs in the job\"\n"
    << "set ylabel \"GPU-hours lost to last-hop link faults (mean, 95 % CI over seeds)\"\n";
  int64_t fewest = r.front().gpus, most = r.front().gpus;
  for (const auto& so : r) {
    fewest = std::min(fewest, so.gpus);
    most = std::max(most, so.gpus);
  }
  g << "set xrange [" << double(fewest) / 1.5 << ":" << double(most) * 1.5 << "]\n";
  const size_t np = r[0].policies.size();
  for (size_t i = 0; i < np; ++i) {
    g << "$p" << i << " << EOD\n";
    for (const auto& so : r) {
      Interval v = meanCi95(so.policies[i].gpuHoursLostToLinkFaults);
      if (v.mean <= 0) continue;  // nothing lost: no point on a log scale
      double half = v.half.value_or(0);
      double lo = std::max(v.mean - half, v.mean / 10), hi = v.mean + half;
      g << so.gpus << " " << v.mean << " " << lo << " " << hi << "\n";
    }
    g << "EOD\n";
  }
  g << "plot ";
  for (size_t i = 0; i < np; ++i)
    g << (i ? ", \\\n     " : "") << "$p" << i << " using 1:2:3:4 with yerrorlines lw 2 pt 7 ps 0.8 title "
      << quoted(r[0].policies[i].name);
  g << "\n";
  RECCL_TRY(runGnuplot(g.str()));
  struct stat sb {};
  if (::stat(pngPath.c_str(), &sb) != 0 || sb.st_size == 0)
    return {Errc::kInternal, "--plot: gnuplot wrote no image to " + pngPath};
  return {};
}

}  // namespace reccl::sim
