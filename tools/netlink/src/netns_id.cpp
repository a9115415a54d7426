#include "reccl/netlink/netns_id.h"

#include <libmnl/libmnl.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>

#include "reccl/netlink/netns.h"

namespace reccl::netlink {

Result<int> getNetnsId(NlSocket& nl, int netnsFd) {
  nlmsghdr* nlh = nl.startMessage(RTM_GETNSID, 0);
  auto* g = static_cast<rtgenmsg*>(mnl_nlmsg_put_extra_header(nlh, sizeof(rtgenmsg)));
  g->rtgen_family = AF_UNSPEC;
  mnl_attr_put_u32(nlh, NETNSA_FD, static_cast<uint32_t>(netnsFd));
  int nsid = -1;
  RECCL_TRY(nl.query(nlh, "get netns id", [&](const nlmsghdr* m) {
    if (m->nlmsg_type != RTM_NEWNSID) return;
    mnl_attr_parse(
        m, sizeof(rtgenmsg),
        [](const nlattr* attr, void* data) {
          if (mnl_attr_get_type(attr) == NETNSA_NSID) {
            *static_cast<int*>(data) = static_cast<int32_t>(mnl_attr_get_u32(attr));
          }
          return MNL_CB_OK;
        },
        &nsid);
  }));
  if (nsid < 0) return Status{Errc::kNotFound, "netns has no id here"};
  return nsid;
}

Result<std::string> netnsNameForId(NlSocket& nl, int nsid) {
  for (const std::string& name : listNetns()) {
    auto fd = openNetns(name);
    if (!fd.ok()) continue;
    auto id = getNetnsId(nl, fd->get());
    if (id.ok() && *id == nsid) return name;
  }
  return Status{Errc::kNotFound, "no named netns has id " + std::to_string(nsid)};
}

}  // namespace reccl::netlink
