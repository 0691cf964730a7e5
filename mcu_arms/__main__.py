from mcu_arms.entry import main

main()
