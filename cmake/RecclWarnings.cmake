# Warning set shared by every reccl target. A function, so callers stay explicit.
function(reccl_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wno-unused-parameter -Werror=return-type -Werror=format>)
endfunction()
