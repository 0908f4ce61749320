# Checks that every source and header of a layer includes only its own headers and those of the
# layers below it (cmake -P, run as a build step before any library compiles and as a test).
#
#   cmake -DRULES=<file> -DROOT=<project dir> [-DSTAMP=<file>] -P CheckLayers.cmake
#
# RULES holds one line per layer: `name|path,path,...|prefix,prefix,...`: the folders and single
# headers it owns (absolute paths) and the include prefixes it may use ("core/",
# "nexus/status.h", ...: its own and every lower layer's). An include with no '/' is a file of
# the same directory. Any other include fails the check with a line naming the file, the include
# and what that layer may use. STAMP is touched when everything passes.
if(NOT RULES)
  message(FATAL_ERROR "CheckLayers: -DRULES=<file> is required")
endif()
file(STRINGS "${RULES}" lines)
set(violations 0)
foreach(line IN LISTS lines)
  if(line MATCHES "^#" OR line STREQUAL "")
    continue()
  endif()
  string(REPLACE "|" ";" fields "${line}")
  list(GET fields 0 layer)
  list(GET fields 1 dirs)
  list(GET fields 2 allowed)
  string(REPLACE "," ";" dirs "${dirs}")
  string(REPLACE "," ";" allowed "${allowed}")
  foreach(dir IN LISTS dirs)
    # A directory entry may be one header ("nexus/status.h") or a folder ("core").
    if(dir MATCHES "\\.h$")
      set(files "${dir}")
    else()
      file(GLOB files "${dir}/*.h" "${dir}/*.cc" "${dir}/*.cu" "${dir}/*.cuh")
    endif()
    foreach(f IN LISTS files)
      file(STRINGS "${f}" incs REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"]+\"")
      foreach(inc IN LISTS incs)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*" "\\1" path "${inc}")
        if(NOT path MATCHES "/")
          continue()
        endif()
        set(ok FALSE)
        foreach(prefix IN LISTS allowed)
          string(LENGTH "${prefix}" n)
          string(SUBSTRING "${path}" 0 ${n} head)
          if(head STREQUAL prefix)
            set(ok TRUE)
            break()
          endif()
        endforeach()
        if(NOT ok)
          file(RELATIVE_PATH rel "${ROOT}" "${f}")
          string(REPLACE ";" " " may "${allowed}")
          message(SEND_ERROR "layer '${layer}': ${rel} includes \"${path}\", "
                             "which is not its own or a lower layer's (it may include: ${may})")
          math(EXPR violations "${violations} + 1")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR
          "CheckLayers: ${violations} include(s) cross the layers (docs/ARCHITECTURE.md)")
endif()
if(STAMP)
  file(TOUCH "${STAMP}")
endif()
