// Expands tuning.def for one kind of row: define the macro of the rows wanted, then include this file. Every
// other kind expands to nothing, and every macro is undefined again after, so the next table can define its
// own. Included once per table, so no include guard.
#ifndef MCCL_TUNE_ROW
#define MCCL_TUNE_ROW(maxRanks, oneShotMax, oneShotSimpleMax, twoShotMax, oneShotBareMax)
#endif
#ifndef MCCL_TUNE_COLL
#define MCCL_TUNE_COLL(maxRanks, func, oneShotMax, llMax, ll128Max)
#endif
#ifndef MCCL_TUNE_CE_AR_MIN
#define MCCL_TUNE_CE_AR_MIN(maxRanks, bytes)
#endif
#ifndef MCCL_TUNE_MODEL
#define MCCL_TUNE_MODEL(maxRanks, algo, proto, latencyUs, busGBps)
#endif
#include "tuning.def"
#undef MCCL_TUNE_ROW
#undef MCCL_TUNE_COLL
#undef MCCL_TUNE_CE_AR_MIN
#undef MCCL_TUNE_MODEL
