from onceover.cli import main

main()
