/* Fortran 90 parameterised datatypes from C, as an MPI test suite uses them (1 rank): what the
 * application sees must be the same with and without pathscope (tests/e2e/test_transparency.py
 * compares the output and the exit status).  For each type: MPI_Type_create_f90_real,
 * _complex, _integer (valid parameters, MPI_UNDEFINED ones), MPI_Type_get_envelope,
 * MPI_Type_get_contents, MPI_Type_size, one message with the type on MPI_COMM_SELF; then
 * parameters no type has, with MPI_ERRORS_RETURN (the error class is printed).
 *
 * MPI_Type_get_contents is given exactly the entries the envelope asks for, plus one
 * datatype entry initialised to MPI_DATATYPE_NULL: Open MPI 4.1 reads (and dereferences)
 * max_datatypes entries of the array, not the type's own number (0 here), so an
 * uninitialised entry makes it crash or not depending on stack garbage (docs/user-guide.md,
 * Troubleshooting). */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static const char *combiner_name(int c)
{
    if (c == MPI_COMBINER_F90_REAL) return "f90-real";
    if (c == MPI_COMBINER_F90_COMPLEX) return "f90-complex";
    if (c == MPI_COMBINER_F90_INTEGER) return "f90-integer";
    if (c == MPI_COMBINER_NAMED) return "named";
    return "other";
}

static const char *class_name(int code)
{
    int cls = -1;
    if (code == MPI_SUCCESS) return "success";
    MPI_Error_class(code, &cls);
    if (cls == MPI_ERR_ARG) return "MPI_ERR_ARG";
    if (cls == MPI_ERR_TYPE) return "MPI_ERR_TYPE";
    if (cls == MPI_ERR_OTHER) return "MPI_ERR_OTHER";
    return "another error class";
}

static void check(const char *what, int rc, MPI_Datatype t)
{
    printf("%s: create %s", what, class_name(rc));
    if (rc != MPI_SUCCESS || t == MPI_DATATYPE_NULL) {
        printf("\n");
        return;
    }
    int ni = -1, na = -1, nd = -1, comb = -1;
    rc = MPI_Type_get_envelope(t, &ni, &na, &nd, &comb);
    printf(", envelope %s %d %d %d %s", class_name(rc), ni, na, nd, combiner_name(comb));
    int parms[2] = {-1, -1};
    MPI_Aint addr[1] = {0};
    MPI_Datatype inner[1] = {MPI_DATATYPE_NULL};
    rc = MPI_Type_get_contents(t, ni, na, nd + 1, parms, addr, inner);
    printf(", contents %s", class_name(rc));
    for (int i = 0; i < ni && i < 2; i++) {
        if (parms[i] == MPI_UNDEFINED) printf(" undefined");
        else printf(" %d", parms[i]);
    }
    int size = -1;
    MPI_Type_size(t, &size);
    char out[64], in[64];
    memset(out, 7, sizeof out);
    memset(in, 0, sizeof in);
    MPI_Request r[2];
    MPI_Irecv(in, 1, t, 0, 5, MPI_COMM_SELF, &r[0]);
    MPI_Isend(out, 1, t, 0, 5, MPI_COMM_SELF, &r[1]);
    rc = MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    printf(", size %d, message %s %s\n", size, class_name(rc),
           memcmp(in, out, (size_t)size) == 0 ? "intact" : "changed");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Datatype t;
    int rc;
    for (int round = 0; round < 2; round++) { /* the second round gets the cached types */
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_real(3, 10, &t); check("real 3 10", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_real(6, 30, &t); check("real 6 30", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_real(15, MPI_UNDEFINED, &t);
        check("real 15 undefined", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_real(MPI_UNDEFINED, 100, &t);
        check("real undefined 100", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_complex(3, 10, &t);
        check("complex 3 10", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_complex(MPI_UNDEFINED, 30, &t);
        check("complex undefined 30", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_integer(3, &t); check("integer 3", rc, t);
        t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_integer(9, &t); check("integer 9", rc, t);
    }
    /* no such types: an error, returned */
    t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_real(40, 4000, &t); check("real 40 4000", rc, t);
    t = MPI_DATATYPE_NULL; rc = MPI_Type_create_f90_integer(40, &t); check("integer 40", rc, t);
    int ni, na, nd, comb;
    rc = MPI_Type_get_envelope(MPI_DATATYPE_NULL, &ni, &na, &nd, &comb);
    printf("envelope of MPI_DATATYPE_NULL: %s\n", class_name(rc));
    MPI_Finalize();
    return 0;
}
