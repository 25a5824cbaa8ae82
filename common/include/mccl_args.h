/**
 * @file mccl_args.h
 * @brief Command-line arguments of the examples and benchmarks, checked the same way in every program.
 * @ingroup common
 *
 * `--help` (or `-h`) prints `usage: NAME ARGS` and what the program does to stdout and exits 0; an
 * option the program does not know, an extra argument or a bad number prints the error and the usage
 * line to stderr and exits 2. Settings beyond the arguments come from MCCL_* environment variables.
 *
 * @code
 * int main(int argc, char** argv) {
 *   mcclArgsCheck(argc, argv, 1, "[repeats]", "  repeats  timed rounds per size, 1..100000 (default 15)");
 *   int repeats = (int)mcclArgsInt(argc, argv, 1, "repeats", 15, 1, 100000);
 * @endcode
 */
#ifndef MCCL_ARGS_H_
#define MCCL_ARGS_H_

#ifdef __cplusplus
extern "C" {
#endif

/** @addtogroup common
 * @{ */

/**
 * @brief Check main()'s arguments; returns only if they are acceptable.
 *
 * Exits 0 after printing the usage for `--help`/`-h`; exits 2 after printing the error and the
 * usage line to stderr for any other argument that starts with '-' or for more than maxPositional
 * arguments. Call it first in main(), before MPI_Init or fork.
 * @param[in] argc,argv main()'s arguments.
 * @param[in] maxPositional how many positional arguments the program accepts (0: none).
 * @param[in] args the arguments as the usage line shows them after the program name, e.g.
 *            "[repeats]"; "" when the program takes none.
 * @param[in] help the lines printed after the usage line by `--help`: what the program does and
 *            what each argument means. NULL for none.
 */
void mcclArgsCheck(int argc, char** argv, int maxPositional, const char* args, const char* help);

/**
 * @brief Positional argument number index (1 = argv[1]) as an integer in [min, max].
 *
 * Accepts decimal, 0x hex and a K, M or G suffix (powers of 1024). A value that is not a whole
 * number, or is outside [min, max], prints an error naming the argument and the usage line to
 * stderr and exits 2. Call mcclArgsCheck() first (it records the usage line).
 * @param[in] argc,argv main()'s arguments.
 * @param[in] index which positional argument (1-based).
 * @param[in] name the argument's name in the usage line, for the error message.
 * @param[in] def the value when the argument is absent.
 * @param[in] min smallest accepted value.
 * @param[in] max largest accepted value.
 * @return the value.
 */
long long mcclArgsInt(int argc, char** argv, int index, const char* name, long long def, long long min, long long max);

/**
 * @brief Check main()'s arguments for a program that takes options (and no positional arguments);
 * returns only if they are acceptable.
 *
 * `options` lists the spellings the program accepts, NULL-terminated; a spelling that ends in '='
 * takes a value, given as the next argument or joined with '=' (`-c 16`, `--channels=16`), the
 * others are flags. `--help`/`-h` and refusals behave as in mcclArgsCheck(); an option given twice
 * takes its last value. Read the values with mcclArgsOpt() and mcclArgsOptInt().
 * @code
 * static const char* const opts[] = {"-c=", "--sweep-channels=", "--no-nccl", NULL};
 * mcclArgsCheckOpts(argc, argv, opts, "[-c N] [--sweep-channels LIST] [--no-nccl]", "...");
 * int nch = (int)mcclArgsOptInt(argc, argv, "-c", 16, 1, 64);
 * @endcode
 * @param[in] argc,argv main()'s arguments.
 * @param[in] options   the accepted spellings, NULL-terminated ("-c=" takes a value, "--no-nccl" not); the
 *                      table is copied (at most 128), so it may live on the caller's stack.
 * @param[in] args      the usage line after the program name, e.g. "[-c N] [--no-nccl]".
 * @param[in] help      the lines `--help` prints after the usage line, or NULL.
 */
void mcclArgsCheckOpts(int argc, char** argv, const char* const* options, const char* args, const char* help);

/**
 * @brief Value of an option checked by mcclArgsCheckOpts(): its last occurrence.
 * @param[in] argc,argv main()'s arguments.
 * @param[in] name      the option as listed, without the '=' ("-c", "--no-nccl").
 * @return the value; "" for a flag that is present; NULL when the option is absent.
 */
const char* mcclArgsOpt(int argc, char** argv, const char* name);

/**
 * @brief An option's value as an integer in [min, max] (the number forms and errors of
 * mcclArgsInt(), exit 2 with the usage line for a bad one).
 * @param[in] argc,argv main()'s arguments.
 * @param[in] name      the option as listed, without the '='.
 * @param[in] def       the value when the option is absent.
 * @param[in] min       smallest accepted value.
 * @param[in] max       largest accepted value.
 * @return the value.
 */
long long mcclArgsOptInt(int argc, char** argv, const char* name, long long def, long long min, long long max);

/**
 * @brief Print an error about an argument's value and the usage line to stderr, and exit 2 (for
 * checks mcclArgsOptInt() cannot make, such as a list's elements).
 * @param[in] what  the message, e.g. "--sweep-channels: 0 is not in 1..64".
 */
void mcclArgsFail(const char* what);

/** @} */

#ifdef __cplusplus
}
#endif
#endif
