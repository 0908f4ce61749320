# The layers of nexus as CMake libraries. Each layer owns folders (and single public headers), links
# the layers below it, and may include only their headers: CheckLayers.cmake runs before any
# library compiles, so an include that crosses the layers upwards fails the build.

# Folders headers are included relative to ("core/tensor.h", "nexus/status.h", "harness/bench.h").
set(NEXUS_INCLUDE_ROOTS ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include
    ${PROJECT_SOURCE_DIR}/bench ${PROJECT_SOURCE_DIR}/tools)
set_property(GLOBAL PROPERTY NEXUS_LAYERS "")
# Every layer library depends on this target; nexus_write_layer_check() gives it the check.
add_custom_target(nexus_layer_check)

# The include prefix of an owned folder or header: its path below the include root holding it.
function(nexus_include_prefix path out)
  foreach(root IN LISTS NEXUS_INCLUDE_ROOTS)
    string(LENGTH "${root}/" n)
    string(SUBSTRING "${path}" 0 ${n} head)
    if(head STREQUAL "${root}/")
      string(SUBSTRING "${path}" ${n} -1 rel)
      if(NOT rel MATCHES "\\.h$")
        set(rel "${rel}/")
      endif()
      set(${out} "${rel}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "nexus_layer: ${path} is under none of ${NEXUS_INCLUDE_ROOTS}")
endfunction()

# nexus_layer(<name> OWNS <folders and headers> [DEPS <lower layers>] [LINK <other targets>]
#             [PRIVATE_LINK <targets>] [EXCLUDE <sources>] [CUDA])
# Builds nexus_<name> from the .cc files of its folders (and .cu files with CUDA; an INTERFACE
# library when there are none).
function(nexus_layer name)
  cmake_parse_arguments(L "CUDA" "" "OWNS;DEPS;LINK;PRIVATE_LINK;EXCLUDE" ${ARGN})
  set(sources "")
  set(prefixes "")
  foreach(p IN LISTS L_OWNS)
    nexus_include_prefix("${p}" prefix)
    list(APPEND prefixes "${prefix}")
    if(NOT p MATCHES "\\.h$")
      file(GLOB cc CONFIGURE_DEPENDS "${p}/*.cc")
      list(APPEND sources ${cc})
      if(L_CUDA)
        file(GLOB cu CONFIGURE_DEPENDS "${p}/*.cu")
        list(APPEND sources ${cu})
      endif()
    endif()
  endforeach()
  foreach(x IN LISTS L_EXCLUDE)
    list(REMOVE_ITEM sources "${x}")
  endforeach()
  set(allowed ${prefixes})
  foreach(d IN LISTS L_DEPS)
    get_property(dep_allowed GLOBAL PROPERTY NEXUS_LAYER_ALLOWED_${d})
    if(NOT DEFINED dep_allowed OR dep_allowed STREQUAL "")
      message(FATAL_ERROR "nexus_layer(${name}): layer '${d}' is not defined before it")
    endif()
    list(APPEND allowed ${dep_allowed})
  endforeach()
  list(REMOVE_DUPLICATES allowed)
  set_property(GLOBAL PROPERTY NEXUS_LAYER_ALLOWED_${name} "${allowed}")
  set_property(GLOBAL APPEND PROPERTY NEXUS_LAYERS "${name}")
  set_property(GLOBAL PROPERTY NEXUS_LAYER_OWNS_${name} "${L_OWNS}")

  set(deps "")
  foreach(d IN LISTS L_DEPS)
    list(APPEND deps nexus_${d})
  endforeach()
  if(sources)
    add_library(nexus_${name} STATIC ${sources})
    target_include_directories(nexus_${name} PUBLIC ${NEXUS_INCLUDE_ROOTS})
    target_link_libraries(nexus_${name} PUBLIC ${deps} ${L_LINK} PRIVATE ${L_PRIVATE_LINK})
    add_dependencies(nexus_${name} nexus_layer_check)
  else()
    add_library(nexus_${name} INTERFACE)
    target_include_directories(nexus_${name} INTERFACE ${NEXUS_INCLUDE_ROOTS})
    target_link_libraries(nexus_${name} INTERFACE ${deps} ${L_LINK})
  endif()
endfunction()

# nexus_check_only(<name> OWNS <folders> ALLOW <include prefixes>)
# Checks the includes of folders that are not a layer library (the CLI's sources) against an
# explicit list, without the lower layers' private folders: e.g. only the public headers.
function(nexus_check_only name)
  cmake_parse_arguments(L "" "" "OWNS;ALLOW" ${ARGN})
  set_property(GLOBAL PROPERTY NEXUS_LAYER_ALLOWED_${name} "${L_ALLOW}")
  set_property(GLOBAL APPEND PROPERTY NEXUS_LAYERS "${name}")
  set_property(GLOBAL PROPERTY NEXUS_LAYER_OWNS_${name} "${L_OWNS}")
endfunction()

# Writes the rules of every layer defined so far and the build step that checks them.
function(nexus_write_layer_check)
  get_property(layers GLOBAL PROPERTY NEXUS_LAYERS)
  set(rules "# layer|owned folders and headers|include prefixes it may use\n")
  set(watched "")
  foreach(l IN LISTS layers)
    get_property(owns GLOBAL PROPERTY NEXUS_LAYER_OWNS_${l})
    get_property(allowed GLOBAL PROPERTY NEXUS_LAYER_ALLOWED_${l})
    string(REPLACE ";" "," owns_csv "${owns}")
    string(REPLACE ";" "," allowed_csv "${allowed}")
    string(APPEND rules "${l}|${owns_csv}|${allowed_csv}\n")
    foreach(p IN LISTS owns)
      if(p MATCHES "\\.h$")
        list(APPEND watched "${p}")
      else()
        file(GLOB files CONFIGURE_DEPENDS "${p}/*.h" "${p}/*.cc" "${p}/*.cu" "${p}/*.cuh")
        list(APPEND watched ${files})
      endif()
    endforeach()
  endforeach()
  set(rules_file ${CMAKE_BINARY_DIR}/nexus_layers.txt)
  file(WRITE ${rules_file} "${rules}")
  set(stamp ${CMAKE_BINARY_DIR}/nexus_layers.ok)
  add_custom_command(
    OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DRULES=${rules_file} -DROOT=${PROJECT_SOURCE_DIR} -DSTAMP=${stamp}
            -P ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    DEPENDS ${watched} ${rules_file} ${PROJECT_SOURCE_DIR}/cmake/CheckLayers.cmake
    COMMENT "Checking that includes follow the layers (cmake/Layers.cmake)"
    VERBATIM)
  add_custom_target(nexus_layer_check_run DEPENDS ${stamp})
  add_dependencies(nexus_layer_check nexus_layer_check_run)
endfunction()
