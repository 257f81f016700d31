import os

# Numba's parallel layer and BLAS threads fight over the two cores of CI; keep runs predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")
