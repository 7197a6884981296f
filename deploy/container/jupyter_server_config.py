# Jupyter Server configuration in the cellblock image: cellblock is the only
# kernel, and idle kernels are culled (which frees their sandboxes entirely).
c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)
c.KernelSpecManager.ensure_native_kernel = False
c.KernelSpecManager.allowed_kernelspecs = {"cellblock"}
c.MappingKernelManager.default_kernel_name = "cellblock"
c.MappingKernelManager.cull_idle_timeout = 3600
c.MappingKernelManager.cull_interval = 300
c.ServerApp.terminals_enabled = False
