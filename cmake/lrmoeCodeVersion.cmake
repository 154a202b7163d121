# Writes the code version every run stores (core/system/code_version.cpp.in) at build time, so
# that a build after a commit, or with uncommitted changes, records what it was built from;
# written at configure time, it named the commit of the last configure. The file is rewritten
# only when the version changes, so an unchanged tree recompiles nothing.
#
#   cmake -DSOURCE_DIR=... -DTEMPLATE=... -DOUTPUT=... -DPROJECT_VERSION=... -P lrmoeCodeVersion.cmake
execute_process(COMMAND git describe --always --dirty --tags
                WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE LRMOE_GIT_VERSION OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET)
if(NOT LRMOE_GIT_VERSION)
  set(LRMOE_GIT_VERSION "unknown")  # not a git checkout, or no git
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
