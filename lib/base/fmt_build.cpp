// fmt's compiled part, built once here rather than in every file: header-only fmt
// (FMT_HEADER_ONLY) compiles all of fmt again in each of the library's files. The
// library still links nothing but libc and libstdc++ (libfmt-dev's headers only).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
// The two locale helpers format.h declares `extern template` for char.
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
