"""harvester_sim: a simulated Harvester HCI cluster behind a real Kubernetes REST API.

Layers (outer to inner): ``cli`` > ``scenarios``/``report`` > ``controllers``/``programs``
> ``client`` > ``api`` > ``clock``. Controllers never touch ``api.store`` directly; they use
``client.Client`` exactly like any other API client.
"""

__version__ = "0.1.0"
