module cmc.example/gogossip

go 1.19
