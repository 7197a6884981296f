# jupyterhub_config.py - JupyterHub (Debian's jupyterhub 3) serving local users,
# each with a single-user Jupyter Server whose only kernel is cellblock.
#
#   CELLBLOCK_PREFIX=/opt/cellblock      where `make install PREFIX=...` put cellblock
#                                        (readable by every user: not a 0700 home)
#   CELLBLOCK_HUB_DIR=/srv/jupyterhub    the hub's database, cookie secret, logs
#   CELLBLOCK_HUB_USERS=alice,bob        who may log in (PAM: their system passwords)
#   CELLBLOCK_HUB_PORT=8000              the proxy's public port (on 127.0.0.1)
#   CELLBLOCK_CHP=/path/to/configurable-http-proxy   (npm: configurable-http-proxy)
#
#   jupyterhub -f deploy/hub/jupyterhub_config.py           (as root: it spawns as the users)
#
# tests/deploy/check_jupyterhub.py runs exactly this with two throwaway users.
import os

c = get_config()  # noqa: F821 (provided by traitlets when the file is loaded)
prefix = os.environ.get("CELLBLOCK_PREFIX", "/usr/local")
hub_dir = os.environ.get("CELLBLOCK_HUB_DIR", "/srv/jupyterhub")
port = int(os.environ.get("CELLBLOCK_HUB_PORT", "8000"))

c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = port
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = port + 1
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:%d" % (port + 2)
if os.environ.get("CELLBLOCK_CHP"):
    c.ConfigurableHTTPProxy.command = [os.environ["CELLBLOCK_CHP"]]
c.JupyterHub.db_url = "sqlite:///" + os.path.join(hub_dir, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(hub_dir, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(hub_dir, "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True      # stopping the hub stops every user's server
c.JupyterHub.cleanup_proxy = True

c.JupyterHub.authenticator_class = "jupyterhub.auth.PAMAuthenticator"
c.Authenticator.allowed_users = {u for u in os.environ.get("CELLBLOCK_HUB_USERS", "").split(",") if u}

# Each user's server: a local process of that user (LocalProcessSpawner), Jupyter
# Server rather than the classic notebook, and cellblock as its only kernel.
c.JupyterHub.spawner_class = "jupyterhub.spawner.LocalProcessSpawner"
c.Spawner.cmd = ["jupyterhub-singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 60
c.Spawner.start_timeout = 60
c.Spawner.environment = {
    "JUPYTERHUB_SINGLEUSER_APP": "jupyter_server.serverapp.ServerApp",
    "JUPYTER_PATH": os.path.join(prefix, "share", "jupyter"),
    "PATH": os.path.join(prefix, "bin") + ":/usr/local/bin:/usr/bin:/bin",
}
c.Spawner.args = [
    "--KernelSpecManager.ensure_native_kernel=False",
    "--KernelSpecManager.allowed_kernelspecs=cellblock",
    "--MappingKernelManager.default_kernel_name=cellblock",
    "--MappingKernelManager.cull_idle_timeout=3600",
    "--ServerApp.terminals_enabled=False",
]
