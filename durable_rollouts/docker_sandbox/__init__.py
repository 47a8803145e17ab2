"""Docker sandboxes: container lifecycle, commands in containers, the git workspace, network and firewall, disk
budget."""
