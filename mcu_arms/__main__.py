from mcu_arms.cli import main

main()
