# Flite ships no pkg-config file or CMake package; find its headers and the
# clustergen voices we embed (slt, rms, awb) and wrap them in one target.
find_path(FLITE_INCLUDE_DIR flite.h PATH_SUFFIXES flite REQUIRED)
set(FLITE_LINK_NAMES flite_cmu_us_slt flite_cmu_us_rms flite_cmu_us_awb
    flite_usenglish flite_cmulex flite m)
set(FLITE_LIBRARIES "")
foreach(name ${FLITE_LINK_NAMES})
  find_library(FLITE_LIB_${name} ${name} REQUIRED)
  list(APPEND FLITE_LIBRARIES ${FLITE_LIB_${name}})
endforeach()
add_library(Flite::Flite INTERFACE IMPORTED)
set_target_properties(Flite::Flite PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES ${FLITE_INCLUDE_DIR}
  INTERFACE_LINK_LIBRARIES "${FLITE_LIBRARIES}")
