from treegrpo.cli import main

main()
