"""The machine tpukit runs on: its devices, its processes and the data on them.

Finding and describing devices and connecting to a multi-host run (``_devices.py``),
where the kernel runs and what to do when a platform is missing (``_environment.py``),
moving pytrees to and from devices (``_transfer.py``), and launching local processes of
one ``jax.distributed`` run (``_launch.py``). (Named ``runtime`` rather than
``devices``: ``tpukit.devices`` is the public function.)
"""
