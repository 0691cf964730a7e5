"""The mineflayer simulator backend: a Node sidecar (sidecar.mjs, its pinned package.json and lockfile) driving one
Mineflayer bot on a Minecraft server the user runs; backend.py is the Simulator, the rest its parts."""
