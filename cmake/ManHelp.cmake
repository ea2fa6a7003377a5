# refgate_man_help(TARGET PAGE page SECTION section PREFIX prefix): make a
# man page the one source of a program's --help text. At build time the page
# is rendered with `mandoc -T utf8` (overstrike stripped) into a C file in the
# build directory, compiled into TARGET, that defines
#   const char PREFIX_synopsis[];          the page's SYNOPSIS
#   const char *const PREFIX_words[];      the command words of each top-level
#   const char *const PREFIX_texts[];        `.It Nm Cm WORDS` item of SECTION,
#                                            and its rendered text (NULL-ended)
# (see cmake/man_help.c). Nothing generated is committed.
include_guard(GLOBAL)

find_program(MANDOC mandoc)
if(NOT MANDOC)
  message(FATAL_ERROR "mandoc not found: the --help texts are rendered from the man pages in "
    "doc/ at build time. Install it (Debian/Ubuntu: apt-get install mandoc; scripts/lib.sh "
    "installs it) or point -DMANDOC=/path/to/mandoc at it.")
endif()

set(REFGATE_MAN_HELP_TOOL_SRC ${CMAKE_CURRENT_LIST_DIR}/man_help.c)

function(refgate_man_help target)
  cmake_parse_arguments(ARG "" "PAGE;SECTION;PREFIX" "" ${ARGN})
  if(NOT ARG_PAGE OR NOT ARG_PREFIX)
    message(FATAL_ERROR "refgate_man_help(${target}): PAGE and PREFIX are required")
  endif()
  if(NOT ARG_SECTION)
    set(ARG_SECTION COMMANDS)
  endif()
  if(NOT TARGET refgate_man_help_tool)
    add_executable(refgate_man_help_tool ${REFGATE_MAN_HELP_TOOL_SRC})
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${ARG_PREFIX}_man.c)
  add_custom_command(OUTPUT ${out}
    COMMAND refgate_man_help_tool ${MANDOC} ${ARG_PAGE} ${ARG_SECTION} ${ARG_PREFIX} ${out}
    DEPENDS ${ARG_PAGE} refgate_man_help_tool
    COMMENT "Rendering the --help texts of ${target} from ${ARG_PAGE}")
  target_sources(${target} PRIVATE ${out})
endfunction()
