// Run-time options of the sanitizer trees (RECCL_SANITIZE, cmake/RecclSanitize.cmake), linked into
// their test programs and workers only. The runtimes read these before the environment, so
// ASAN_OPTIONS, UBSAN_OPTIONS and TSAN_OPTIONS still override any of them for a single run.

extern "C" {

#if defined(__SANITIZE_ADDRESS__)
// detect_stack_use_after_return: a lambda run on another thread (the progress engine, the
//   monitor) that captured a caller's local by reference is caught after the caller returned.
// check_initialization_order/strict_init_order: static initializers across translation units
//   (the parameter table, loggers) must not read each other's objects before they are built.
// detect_leaks: on by default here; said so that a leak failing a test is not a surprise.
__attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:detect_leaks=1";
}
// -fno-sanitize-recover makes every UB report fatal; the stack says where it came from.
__attribute__((visibility("default"), used)) const char* __ubsan_default_options() {
  return "print_stacktrace=1";
}
#endif

#if defined(__SANITIZE_THREAD__)
// second_deadlock_stack: a lock-order report shows where both locks were taken.
__attribute__((visibility("default"), used)) const char* __tsan_default_options() {
  return "second_deadlock_stack=1";
}
#endif

}  // extern "C"
