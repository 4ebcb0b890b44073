# Sourced by the test scripts that start jobs with Open MPI's mpirun: root
# allowed (CI runs as root), shared memory and loopback only (no interface
# probing or single-copy mechanism in containers), no remote launch agent,
# and oversubscription (CI has 2 cores).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_rmaps_base_oversubscribe=1
