"""TF1's session and run options: ``tf.ConfigProto``, ``tf.GPUOptions``, ``tf.RunOptions``,
``tf.RunMetadata``, ``tf.GraphOptions``, ``tf.OptimizerOptions``, accepted as TF1 code writes
them (fields as keyword arguments or set afterwards; an unknown field is refused, as the
protocol buffers refuse it).

Only ``RunOptions.timeout_in_ms`` changes what happens: ``sess.run`` honours it. The rest
configure devices and threads of TF's runtime, which has no counterpart here.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

__all__ = ["ConfigProto", "GPUOptions", "RunOptions", "RunMetadata", "GraphOptions",
           "OptimizerOptions"]


class _Options:
    """A message of plain fields: ``_FIELDS`` maps each to a factory of its default."""

    _FIELDS: Dict[str, Callable[[], Any]] = {}

    def __init__(self, **fields: Any):
        for name, default in self._FIELDS.items():
            object.__setattr__(self, name, default())
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._FIELDS:
            raise ValueError(f'Protocol message {type(self).__name__} has no "{name}" field.')
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        changed = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS
                            if getattr(self, name) != self._FIELDS[name]())
        return f"{type(self).__name__}({changed})"

    def __eq__(self, other: Any) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)


class GPUOptions(_Options):
    _FIELDS = {"allow_growth": bool, "per_process_gpu_memory_fraction": float,
               "visible_device_list": str, "allocator_type": str,
               "deferred_deletion_bytes": int, "polling_active_delay_usecs": int,
               "polling_inactive_delay_msecs": int, "force_gpu_compatible": bool,
               "experimental": dict}


class OptimizerOptions(_Options):
    L1, L0 = 0, -1
    ON_1, OFF = 1, 2
    _FIELDS = {"do_common_subexpression_elimination": bool, "do_constant_folding": bool,
               "max_folded_constant_in_bytes": int, "do_function_inlining": bool,
               "opt_level": int, "global_jit_level": int}


class GraphOptions(_Options):
    _FIELDS = {"enable_recv_scheduling": bool, "optimizer_options": OptimizerOptions,
               "build_cost_model": int, "build_cost_model_after": int,
               "infer_shapes": bool, "place_pruned_graph": bool,
               "enable_bfloat16_sendrecv": bool, "timeline_step": int, "rewrite_options": dict}


class ConfigProto(_Options):
    _FIELDS = {"device_count": dict, "intra_op_parallelism_threads": int,
               "inter_op_parallelism_threads": int, "use_per_session_threads": bool,
               "session_inter_op_thread_pool": list, "placement_period": int,
               "device_filters": list, "gpu_options": GPUOptions,
               "allow_soft_placement": bool, "log_device_placement": bool,
               "graph_options": GraphOptions, "operation_timeout_in_ms": int,
               "rpc_options": dict, "cluster_def": dict, "isolate_session_state": bool,
               "share_cluster_devices_in_session": bool, "experimental": dict}


class RunOptions(_Options):
    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3
    _FIELDS = {"trace_level": int, "timeout_in_ms": int, "inter_op_thread_pool": int,
               "output_partition_graphs": bool, "debug_options": dict,
               "report_tensor_allocations_upon_oom": bool, "experimental": dict}


class RunMetadata(_Options):
    _FIELDS = {"step_stats": dict, "cost_graph": dict, "partition_graphs": list,
               "function_graphs": list}
