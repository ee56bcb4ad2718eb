"""One map over workers (local processes or a dask.distributed cluster, results in input
order) and what its tasks return. Knows no pbsens type: it runs ``fn(context, item)``;
:mod:`pbsens.batches` builds pbsens's batches on it."""
from .executor import local_cluster, map_tasks, shutdown
from .tasks import BatchError, TaskFailure

__all__ = ["map_tasks", "TaskFailure", "BatchError", "shutdown", "local_cluster"]
