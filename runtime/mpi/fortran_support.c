#include "mpi_internal.h"
