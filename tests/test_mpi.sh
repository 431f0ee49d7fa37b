#!/bin/sh
# test_mpi.sh -- examples/mpi/tt_ranks under mpirun: 2 ranks, each bound to
# one core (--bind-to core --map-by core), each building its pool with NULL
# attributes; rank 0 checks every pool is as wide as its rank's CPU set and
# that the two ranks' CPU sets do not overlap. SKIP (77) without MPI, or
# with fewer than 2 CPUs (two ranks cannot get a core each).
prog=${top_builddir:-..}/examples/mpi/tt_ranks
if test ! -x "$prog"; then
    echo "test_mpi: MPI: skipped, no mpicc / mpirun at configure time"
    exit 77
fi
cpus=$(nproc 2>/dev/null || echo 1)
if test "$cpus" -lt 2; then
    echo "test_mpi: skipped, $cpus CPU: 2 ranks cannot be bound to a core each"
    exit 77
fi
mpirun=${MPIRUN:-mpirun}
# --oversubscribe: Open MPI counts slots by cores; --allow-run-as-root: CI
# runs as root. The btl list keeps Open MPI off the network (one host).
OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader}
export OMPI_MCA_btl
exec timeout 120 "$mpirun" --allow-run-as-root --oversubscribe -np 2 --bind-to core \
    --map-by core "$prog" --expect-disjoint
