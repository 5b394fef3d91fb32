"""cuda_configure: finds a CUDA toolkit with NCCL (CUDA_PATH, else /usr/local/cuda).

Creates a repository with:
  //:cuda_nccl  cc_library with the CUDA runtime and NCCL headers and libraries (empty when
                none was found);
  //:defs.bzl   HAS_NCCL = True or False, for select-free conditional compilation.
"""

def _find_cuda(ctx):
    candidates = []
    env_path = ctx.os.environ.get("CUDA_PATH", "")
    if env_path:
        candidates.append(env_path)
    candidates.append("/usr/local/cuda")
    for path in candidates:
        root = ctx.path(path)
        if (root.get_child("include").get_child("nccl.h").exists and
            root.get_child("include").get_child("cuda_runtime_api.h").exists and
            root.get_child("lib64").get_child("libnccl.so").exists):
            return root
    return None

def _cuda_configure_impl(ctx):
    root = _find_cuda(ctx)
    if root == None:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(name = "cuda_nccl")
""")
        ctx.file("defs.bzl", "HAS_NCCL = False\nCUDA_ROOT = \"\"\n")
        return
    ctx.symlink(root.get_child("include"), "include")
    ctx.symlink(root.get_child("lib64"), "lib64")
    ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])
cc_library(
    name = "cuda_nccl",
    hdrs = glob(["include/**"]),
    includes = ["include"],
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-lnccl",
        "-lcudart",
    ],
)
""".format(lib = str(root.get_child("lib64"))))
    ctx.file("defs.bzl", "HAS_NCCL = True\nCUDA_ROOT = \"%s\"\n" % str(root))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH"],
    local = True,
)
