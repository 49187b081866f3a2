/* The collective's own latency, timed the OSU way inside a rank of perfsuite's worker.
 *
 * Built with the MPI compiler wrapper of the library mpi4py loaded (mpicc), as a shared
 * library, and called through ctypes with mpi4py's communicator: the same library, ranks
 * and buffers as the mpi4py calls, without Python between two collectives.  One call times
 * `iterations` back-to-back MPI_Allreduce calls (float32 sum) in one region; the caller
 * makes the buffers before the loop and synchronises the ranks with a barrier first.
 */
#include <mpi.h>
#include <string.h>

double perfsuite_allreduce_loop(const MPI_Comm *comm, const float *send, float *recv,
                                int count, long iterations) {
    double start = MPI_Wtime();
    for (long i = 0; i < iterations; i++) {
        if (MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, *comm) != MPI_SUCCESS) {
            return -1.0;
        }
    }
    return MPI_Wtime() - start;
}

/* The library this was built against, to refuse a mismatch with mpi4py's. */
int perfsuite_mpi_library(char *out, int size) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int length = 0;
    if (MPI_Get_library_version(version, &length) != MPI_SUCCESS || size <= 0) {
        return -1;
    }
    strncpy(out, version, (size_t)size - 1);
    out[size - 1] = '\0';
    return 0;
}
