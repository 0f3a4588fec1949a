module cmc.example/gokv

go 1.19
