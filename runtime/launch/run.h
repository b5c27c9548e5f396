/* pathscope-run (runtime/launch): `pathscope run` without Python.  run.c holds the contract:
 * whatever this program does not start exactly as the Python CLI would is handed to Python
 * (run_hand_over), which reports the error line. */
#ifndef PATHSCOPE_RUN_H
#define PATHSCOPE_RUN_H

/* The kinds of options.def (its PS_KIND_* words). */
typedef enum { PS_KIND_PATH, PS_KIND_BOOL, PS_KIND_ENUM, PS_KIND_INT, PS_KIND_LIST } ps_option_kind;

/* A row of options.def. */
typedef struct {
    const char *field, *env;
    ps_option_kind kind;
    const char *def, *accepted;
} run_option;

extern const run_option run_options[];
extern const unsigned run_option_count;

/* A `pathscope run` command line that parsed: the flags' values by option (NULL: not given),
 * -o/--output apart, --mpi, and the program's argv (NULL-terminated, not empty). */
typedef struct {
    const char **values;
    const char *output;
    const char *mpi;
    char **program;
} run_command;

_Noreturn void run_hand_over(const char *reason);

/* options.c */
void run_parse_command_line(int argc, char **argv, run_command *cmd);
void run_options_check_environment(const char *const *ignore, unsigned n_ignore);
void run_options_check_settings(const run_command *cmd);
void run_options_apply_settings(const run_command *cmd);

/* run.c: the program's environment */
const char *run_env_get(const char *name);
void run_env_set(const char *name, const char *value);

/* ldd.c */
const char *run_mpi_from_ldd(const char *executable);

#endif
