"""The process layer: starting, proving and ending the processes of an arm."""
