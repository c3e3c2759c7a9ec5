// SPDX-License-Identifier: BSD-3-Clause
//
// What an application built against newer libfabric headers sees: Open MPI 5's mtl ofi asks
// fi_getinfo for API 1.18, and the tools of a libfabric release for their own version
// (FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION) of the headers they were built with). A plain C
// program, as they are: for each of those versions it asks the core for the dpdk provider's
// entries and prints what it finds. A version above the running core's is refused by the core
// (-FI_ENOSYS: "Requested version is newer than library") and is reported as skipped.
//
//   api_version_probe [VERSION...]     (default: 1.18 and the headers' version; "1.18" form)
// Exit status: 0 when every version the core takes lists dpdk's RDM, DGRAM and MSG entries, 1 when
// one does not, 77 (skipped) when the core takes none of them.
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int probe(uint32_t version) {
  struct fi_info *hints = fi_allocinfo(), *info = NULL, *cur;
  int ret, rdm = 0, dgram = 0, msg = 0;
  const uint32_t core = fi_version();

  if (!hints) return 1;
  hints->fabric_attr->prov_name = strdup("dpdk");
  ret = fi_getinfo(version, NULL, NULL, 0, hints, &info);
  printf("fi_getinfo(FI_VERSION(%u, %u)) on libfabric %u.%u: ", FI_MAJOR(version),
         FI_MINOR(version), FI_MAJOR(core), FI_MINOR(core));
  if (FI_VERSION_LT(core, version)) {
    printf("%d (%s): the core is older, skipped\n", ret, fi_strerror(-ret));
    fi_freeinfo(hints);
    return 77;
  }
  if (ret) {
    printf("%d (%s)\n", ret, fi_strerror(-ret));
    fi_freeinfo(hints);
    return 1;
  }
  printf("\n");
  for (cur = info; cur; cur = cur->next) {
    if (strcmp(cur->fabric_attr->prov_name, "dpdk") != 0) continue;
    printf("  provider %s %u.%u, api_version %u.%u, fabric %s, domain %s, %s\n",
           cur->fabric_attr->prov_name, FI_MAJOR(cur->fabric_attr->prov_version),
           FI_MINOR(cur->fabric_attr->prov_version), FI_MAJOR(cur->fabric_attr->api_version),
           FI_MINOR(cur->fabric_attr->api_version), cur->fabric_attr->name, cur->domain_attr->name,
           fi_tostr(&cur->ep_attr->type, FI_TYPE_EP_TYPE));
    rdm |= cur->ep_attr->type == FI_EP_RDM;
    dgram |= cur->ep_attr->type == FI_EP_DGRAM;
    msg |= cur->ep_attr->type == FI_EP_MSG;
  }
  fi_freeinfo(info);
  fi_freeinfo(hints);
  if (!(rdm && dgram && msg)) {
    printf("  missing:%s%s%s\n", rdm ? "" : " FI_EP_RDM", dgram ? "" : " FI_EP_DGRAM",
           msg ? "" : " FI_EP_MSG");
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  uint32_t versions[16];
  int n = 0, i, failed = 0, checked = 0;

  if (argc > 1) {
    for (i = 1; i < argc && n < 16; ++i) {
      unsigned major, minor;
      if (sscanf(argv[i], "%u.%u", &major, &minor) != 2) {
        fprintf(stderr, "usage: %s [MAJOR.MINOR...]\n", argv[0]);
        return 2;
      }
      versions[n++] = FI_VERSION(major, minor);
    }
  } else {
    versions[n++] = FI_VERSION(1, 18);                               // Open MPI 5's mtl ofi
    versions[n++] = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);  // these headers' tools
  }
  printf("built against libfabric headers %u.%u\n", FI_MAJOR_VERSION, FI_MINOR_VERSION);
  for (i = 0; i < n; ++i) {
    int r = probe(versions[i]);
    if (r == 77) continue;
    ++checked;
    if (r) failed = 1;
  }
  if (!checked) return 77;
  return failed;
}
