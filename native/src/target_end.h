#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
/* _MSC_VER: target_begin.h pushed nothing */
