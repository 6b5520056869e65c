# Sourced by the GPU scripts (gpu-lane.sh, gpu-ab.sh; from the repo root, PREFIX set): the private prefix of the
# Debian packages the GPU machine lacks, and the environment that builds and runs against it.
#   make_prefix   unpack .debs/*.deb into $PREFIX and point their .pc files at it (returns 1 on failure)
#   gpu_env       set NVCC, CUDA_HOME and LIBDIR; export PATH, PKG_CONFIG_PATH, LD_LIBRARY_PATH, LIBRARY_PATH, CPATH
#   cuda_stale B  before building B again: deletes B's CUDA objects if a header changed since B's last build
#   list_shard I N  `meson test --list` on stdin: the test names whose 1-based place is I modulo N, one a line

make_prefix() {
    rm -rf "$PREFIX" && mkdir -p "$PREFIX" || return 1
    local n=0 deb
    for deb in .debs/*.deb; do
        if [ ! -e "$deb" ]; then
            echo "no .debs/*.deb: run scripts/gpu-lane-fetch.sh on the developer machine and carry .debs"
            return 1
        fi
        case $deb in
        */libssl-dev_*) [ -f /usr/include/openssl/evp.h ] && continue ;; # the machine's own headers win
        esac
        dpkg -x "$deb" "$PREFIX" || return 1
        n=$((n + 1))
    done
    local so
    for so in libcrypto libssl; do # libssl-dev's links name Debian's runtime: use the machine's (same soname)
        [ -L "$PREFIX/usr/lib/x86_64-linux-gnu/$so.so" ] && [ -e "/usr/lib/x86_64-linux-gnu/$so.so.3" ] &&
            ln -sf "/usr/lib/x86_64-linux-gnu/$so.so.3" "$PREFIX/usr/lib/x86_64-linux-gnu/$so.so"
    done
    # Debian's .pc files name /usr absolutely (prefix=/usr, libdir=/usr/lib/..., -I/usr/include, -L/usr/lib/...)
    find "$PREFIX" -name '*.pc' -print0 |
        xargs -0 -r sed -i -E "s#(^|[=[:space:]]|-I|-L)/usr(/|[[:space:]]|\$)#\1$PREFIX/usr\2#g" || return 1
    echo "$n packages unpacked into $PREFIX"
    grep -H . "$PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
    if grep -nE '(^|[=[:space:]]|-I|-L)/usr(/|[[:space:]]|$)' "$PREFIX"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc; then
        echo "absolute /usr paths left in the .pc files above"
        return 1
    fi
}

gpu_env() {
    NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
    CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
    LIBDIR=$PREFIX/usr/lib/x86_64-linux-gnu
    export PATH=$CUDA_HOME/bin:$PATH
    export PKG_CONFIG_PATH=$LIBDIR/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export LD_LIBRARY_PATH=$LIBDIR:$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LIBRARY_PATH=$LIBDIR${LIBRARY_PATH:+:$LIBRARY_PATH}
    export CPATH=$PREFIX/usr/include${CPATH:+:$CPATH}
}

# meson before 1.4 gives nvcc no -MD/-MF, so ninja records no header for a CUDA object (`ninja -t deps X.cu.o`:
# "#deps 0"; meson issue 11969, fixed in 1.4) and a changed .cuh or .h rebuilds none of the .cu units that include
# it: a build reused on a warm GPU machine (gpu-ab.sh's build-ab-N, gpu-lane.sh's build-gpu) would test and time
# the old kernels. cuda_stale B keeps a hash of every header under the source folders in B/.rc-headers and, where it
# differs from the tree's (or is missing), deletes B's *.cu.o, which ninja then compiles again.
cuda_stale() {
    local b=$1 sum
    [ -f "$b/build.ninja" ] || return 0
    sum=$(find cuda engine harness model ref tests tools \( -name '*.h' -o -name '*.cuh' \) -print 2> /dev/null |
        LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$b/.rc-headers" 2> /dev/null)" != "$sum" ]; then
        find "$b" -name '*.cu.o' -delete
        printf '%s\n' "$sum" > "$b/.rc-headers"
    fi
}

# `meson test --list` writes a test as "refchain:gpu+engine / engine.x" in meson 1.0 (Debian's, the developer
# machine's) and as "gpu+engine - refchain:engine.x" in 1.12 (the GPU machine's: session 42's first shard, which read
# only the first form, found no test there and ran none), or "refchain:engine.x" for a test in no suite; other lines
# (ninja's "no work to do") are none of these. tests/list_shard.sh checks the forms.
list_shard() {
    awk -v i="$1" -v n="$2" '
        / \/ / { sub(/^.* \/ /, ""); t = $0 }
        !/ \/ / && /^[^ ]+ - [^ :]+:/ { sub(/^[^ ]+ - [^ :]+:/, ""); t = $0 }
        t == "" && /^[^ :]+:[^ ]+$/ { sub(/^[^ :]+:/, ""); t = $0 }
        t != "" { k++; if ((k - 1) % n == i - 1) print t; t = "" }'
}
