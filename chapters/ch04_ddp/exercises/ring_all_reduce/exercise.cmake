# Runs under `mpirun -n 3`: three ranks, so that the tensor's chunks and the ring's steps do not
# pair up by chance (see chapters/exercises.cmake).
set(EXERCISE_MPI_RANKS 3)
