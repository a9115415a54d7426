// The Python module reccl_torch._C: the process group class, which is also the creator function
// torch.distributed.Backend.register_backend takes (store, rank, size, timeout).
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group_reccl.h"

namespace py = pybind11;
using reccl_torch::ProcessGroupReccl;

PYBIND11_MODULE(_C, m) {
  // torch.distributed registers c10d::ProcessGroup and c10d::Store with pybind11: the class
  // below derives from the one and its constructor takes the other.
  py::module_::import("torch.distributed");
  ProcessGroupReccl::setWaitScope([](const std::function<void()>& wait) {
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      wait();
    } else {
      wait();
    }
  });
  py::class_<ProcessGroupReccl, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupReccl>>(
      m, "ProcessGroupReccl",
      "A torch.distributed process group on a reccl communicator (CPU tensors). Created by\n"
      "torch.distributed.init_process_group('reccl') / new_group(backend='reccl').")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout) {
             // Collective and blocking (rendezvous through the store): other Python threads run.
             py::gil_scoped_release nogil;
             return c10::make_intrusive<ProcessGroupReccl>(store, rank, size, timeout);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"))
      .def("stats", &ProcessGroupReccl::stats,
           "The communicator's counters (recclCommStats_t fields: collectives, failovers, ...).")
      .def_property_readonly("fault_source", &ProcessGroupReccl::faultSource,
                             "The link-fault source the communicator uses now (\"bpf:...\", \"rtnetlink\", ...).")
      .def_property_readonly("timeout", &ProcessGroupReccl::timeout);
}
