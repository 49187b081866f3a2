#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int n = argc > 1 ? atoi(argv[1]) : 2;  /* floats */
    int iters = argc > 2 ? atoi(argv[2]) : 200000;
    float *s = malloc(n * sizeof(float)), *r = malloc(n * sizeof(float));
    for (int i = 0; i < n; i++) s[i] = (float)i;
    for (int i = 0; i < 10000; i++) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < 5; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int i = 0; i < iters; i++) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t = (MPI_Wtime() - t) / iters;
        if (rank == 0) printf("C %d B: %.3f us\n", n * 4, t * 1e6);
    }
    MPI_Finalize();
    return 0;
}
