// Testbed: bring up / tear down H hosts x R rails out of network namespaces, and run commands in
// the hosts. All calls need root (CAP_SYS_ADMIN + CAP_NET_ADMIN); they return kPermission
// otherwise.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reccl/common/status.h"
#include "reccl/testbed/testbed_spec.h"
#include "reccl/testbed/testbed_state.h"

namespace reccl::testbed {

struct DownReport {
  std::vector<std::string> removed;  // "netns tb1-h0", "state /run/reccl/testbed/tb1.json", ...
  std::vector<std::string> errors;   // what could not be removed, one line each
};

class Testbed {
 public:
  // Creates everything or nothing: on any failure, what was created is removed again.
  // kExists when the name (state file or any of its namespaces) is in use. `stop` is asked
  // between steps (every namespace and NIC, and once more at the end); when it returns true, up
  // removes what it built with down() and returns kAborted (kSystem if that left something).
  static Result<TestbedState> up(const TestbedSpec& spec, const std::function<bool()>& stop = {});
  // Removes every namespace, the forwarder and the state file of `name`, also after a crash of
  // `up` or of its owner. Idempotent: a second call removes nothing and succeeds. Namespaces are
  // the state record's; without a (readable) record only those wired as the testbed (the fabric's
  // `mgmt` bridge, a host's mgmt0 peered into the fabric), since a name alone proves nothing.
  // Others named like the testbed's are kept and listed in errors, unless force.
  static Result<DownReport> down(std::string_view name, bool force = false);
  static Result<TestbedState> load(std::string_view name);
  static std::vector<std::string> list();
};

// Ok when the process may create namespaces; kPermission with a one-line reason otherwise.
Status requireRoot();

}  // namespace reccl::testbed
