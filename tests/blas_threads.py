"""BLAS thread counts as threadpoolctl reports them (tests of pbsens.system.threads and of the
sensitivities paths that skip the limit)."""
import pytest
from threadpoolctl import ThreadpoolController, threadpool_info


def blas_counts():
    """The thread count of every BLAS library loaded in this process."""
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def two_blas_threads():
    """Run the test with every BLAS library at 2 threads, whatever the environment says."""
    libs = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    if not libs:
        pytest.fail("no BLAS library found by threadpoolctl: numpy without BLAS?")
    before = [lib.get_num_threads() for lib in libs]

    def set_all(counts):
        for lib, n in zip(libs, counts):
            lib.set_num_threads(n)
            # threadpool_limits would keep this thread in control of OpenBLAS until its exit,
            # and threadpoolctl then ignores other threads' settings
            getattr(lib, "clear_controlling_thread", lambda: None)()

    set_all([2] * len(libs))
    assert set(blas_counts()) == {2}
    yield
    set_all(before)
