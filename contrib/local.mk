EXTRA_DIST += contrib/install-deps.sh contrib/plugstack.conf.d/dljob.conf
EXTRA_DIST += contrib/quickstart.sh contrib/sbatch
